# SPDX-License-Identifier: MIT
"""libratelimit: Python binding of the libratelimit C library (ctypes).

The import name is libratelimit, not ratelimit, which is an unrelated
package on PyPI. The binding itself is libratelimit.binding; its public
names and RL_* constants are re-exported here.
"""

from . import binding
from .binding import *  # noqa: F401,F403

# The constants (RL_ALLOW, RL_E*, RL_FLAG_*, ABI_MAJOR, ...) too.
globals().update({n: getattr(binding, n) for n in dir(binding) if n.isupper()})
__all__ = list(binding.__all__)
