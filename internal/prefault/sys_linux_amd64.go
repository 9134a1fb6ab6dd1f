package prefault

const (
	sysRead    = 0
	sysClose   = 3
	sysMadvise = 28
	sysOpenat  = 257
)
