package prefault

const (
	sysMincore = 232
	sysOpenat  = 56
	sysClose   = 57
	sysRead    = 63
	sysMadvise = 233
)
