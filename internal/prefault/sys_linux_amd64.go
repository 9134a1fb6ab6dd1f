package prefault

const (
	sysMincore = 27
	sysRead    = 0
	sysClose   = 3
	sysMadvise = 28
	sysOpenat  = 257
)
