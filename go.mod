module github.com/dorisarm/dorisarm

go 1.26

require (
	github.com/hashicorp/go-version v1.9.0
	github.com/spf13/cobra v1.10.2
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/google/go-containerregistry v0.22.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
)
