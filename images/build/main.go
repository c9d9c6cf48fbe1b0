// Command build makes packline's manager and worker images without a
// container daemon (see package imagebuild) and pushes them to a registry or
// writes them to an OCI image layout. `make images` runs it.
//
//	go run ./images/build --oci-layout dist/oci
//	go run ./images/build --push 127.0.0.1:5000/packline --plain-http
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/packline/packline/images/imagebuild"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images/build:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		push, ociLayout, tag, commands, platforms, source, caCerts, version string
		plainHTTP                                                           bool
	)
	flag.StringVar(&push, "push", "", "Repository prefix to push to; images go to <prefix>/<command>:<tag>.")
	flag.BoolVar(&plainHTTP, "plain-http", false, "Push over HTTP without TLS (a loopback or sandbox registry).")
	flag.StringVar(&ociLayout, "oci-layout", "", "Write the images into this OCI image layout folder.")
	flag.StringVar(&tag, "tag", "", "Tag to push or name in the layout (default: the version).")
	flag.StringVar(&version, "version", "", "Version stamped into binaries and labels (default: git describe).")
	flag.StringVar(&commands, "commands", "manager,worker", "Commands under ./cmd to build.")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Platforms of every image.")
	flag.StringVar(&source, "source", "https://github.com/packline/packline", "org.opencontainers.image.source label.")
	flag.StringVar(&caCerts, "ca-certs", imagebuild.DefaultCACerts, "CA bundle copied into the images.")
	flag.Parse()
	if push == "" && ociLayout == "" {
		return fmt.Errorf("nothing to do: give --push <registry/prefix> and/or --oci-layout <dir>")
	}

	plats, err := imagebuild.ParsePlatforms(platforms)
	if err != nil {
		return err
	}
	prov, err := imagebuild.GitProvenance(".")
	if err != nil {
		return fmt.Errorf("reading the commit (run from the repository root): %w", err)
	}
	if version != "" {
		prov.Version = version
	}
	if tag == "" {
		// A tag may not hold '+' and the like; git describe output is safe.
		tag = prov.Version
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := imagebuild.Build(ctx, imagebuild.Options{
		ModuleDir: ".",
		Commands:  strings.Split(commands, ","),
		Platforms: plats,
		Version:   prov.Version,
		Revision:  prov.Revision,
		Source:    source,
		Created:   prov.Created,
		CACerts:   caCerts,
		Log:       func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "built %s for %s in %s (version %s, revision %s)\n",
		commands, platforms, time.Since(start).Round(time.Second), prov.Version, prov.Revision)

	var out []imagebuild.Published
	if ociLayout != "" {
		p, err := res.WriteLayout(ociLayout, tag)
		if err != nil {
			return err
		}
		out = append(out, p...)
	}
	if push != "" {
		p, err := res.Push(ctx, strings.TrimSuffix(push, "/"), tag, plainHTTP)
		if err != nil {
			return err
		}
		out = append(out, p...)
	}
	// stdout carries only the references, for scripts: <ref>@<digest>.
	for _, p := range out {
		fmt.Printf("%s@%s\n", p.Ref, p.Digest)
	}
	return nil
}
