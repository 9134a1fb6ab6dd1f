package prefault

const (
	sysOpenat  = 56
	sysClose   = 57
	sysRead    = 63
	sysMadvise = 233
)
