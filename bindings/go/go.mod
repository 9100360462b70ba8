module libratelimit/go

go 1.19
