module libratelimit/go/xtimebench

go 1.19

require (
	golang.org/x/time v0.3.0
	libratelimit/go v0.0.0
)

replace libratelimit/go => ../
