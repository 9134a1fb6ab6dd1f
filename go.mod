module github.com/dorisarm/dorisarm

go 1.26

require (
	github.com/hashicorp/go-version v1.9.0
	gopkg.in/yaml.v3 v3.0.1
)
