package main

import (
	"fmt"
	"os"
)

// version is stamped by the image build (-ldflags -X main.version=…), so a
// running pod can say which release it is.
var version = "dev"

// `worker --version` is answered before anything else starts, so it works
// without a cluster or a spec; images/imagebuild's test runs it to prove the
// stamped binary is the one in the image.
func init() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version)
		os.Exit(0)
	}
}
