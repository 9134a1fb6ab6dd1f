module dagger/dorisarm

go 1.26
