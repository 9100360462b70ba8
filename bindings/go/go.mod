module libratelimit/go

go 1.19

require golang.org/x/time v0.3.0
