package scan

import "github.com/dorisarm/dorisarm/internal/isa"

type isaTable = isa.Table

func defaultTable() *isa.Table { return isa.Default() }
