/* SPDX-License-Identifier: MIT */
/*
 * Calendar arithmetic on day numbers (H. Hinnant's days_from_civil and
 * civil_from_days): exact for every date, no time zone database, no libc
 * (gmtime/timegm read TZ and locks). Only dates from 1970 on arise, so the
 * era arithmetic never meets a negative number.
 */
#include "quota/period.h"
#include "ratelimit.h"

#define MS_HOUR UINT64_C(3600000)
#define MS_DAY UINT64_C(86400000)

int64_t rl__days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = y / 400;
    int64_t yoe = y - era * 400;                                   /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

void rl__civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

void rl__quota_period(int32_t kind, uint64_t period_ms, uint64_t now_ms, uint64_t *start,
                      uint64_t *end)
{
    uint64_t day = now_ms / MS_DAY;
    switch (kind) {
    case RL_PERIOD_HOUR:
        *start = now_ms / MS_HOUR * MS_HOUR;
        *end = *start + MS_HOUR;
        return;
    case RL_PERIOD_DAY:
        *start = day * MS_DAY;
        *end = *start + MS_DAY;
        return;
    case RL_PERIOD_WEEK: {
        /* 1970-01-01 was a Thursday: Monday-based weekday (day + 3) mod 7.
         * The epoch's own week began in 1969: it starts at 0 here. */
        int64_t monday = (int64_t)day - (int64_t)((day + 3) % 7);
        *start = monday < 0 ? 0 : (uint64_t)monday * MS_DAY;
        *end = (uint64_t)(monday + 7) * MS_DAY;
        return;
    }
    case RL_PERIOD_MONTH: {
        int64_t y;
        unsigned m, d;
        rl__civil_from_days((int64_t)day, &y, &m, &d);
        *start = (uint64_t)rl__days_from_civil(y, m, 1) * MS_DAY;
        *end = (uint64_t)(m == 12 ? rl__days_from_civil(y + 1, 1, 1)
                                  : rl__days_from_civil(y, m + 1, 1)) * MS_DAY;
        return;
    }
    default:
        *start = now_ms / period_ms * period_ms;
        *end = *start + period_ms;
        return;
    }
}
