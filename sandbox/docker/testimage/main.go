// Command testimage builds the gatebridge-test image from the host's static
// busybox and bash, without a registry:
//
//	go run ./sandbox/docker/testimage [-force] [-ref gatebridge-test:latest]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/gatebridge/gatebridge/sandbox/docker"
	"github.com/moby/moby/client"
)

func main() {
	var opts docker.TestImageOptions
	flag.StringVar(&opts.Ref, "ref", docker.TestImage, "image reference to create")
	flag.StringVar(&opts.Busybox, "busybox", "/bin/busybox", "static busybox binary (Debian busybox-static)")
	flag.StringVar(&opts.Bash, "bash", "/bin/bash-static", "static bash binary (Debian bash-static)")
	flag.BoolVar(&opts.Force, "force", false, "rebuild even when the image exists")
	flag.Parse()
	opts.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gatebridge: docker client: %v\n", err)
		os.Exit(1)
	}
	defer cli.Close()
	if _, err := docker.BuildTestImage(ctx, cli, opts); err != nil {
		fmt.Fprintf(os.Stderr, "gatebridge: %v\n", err)
		os.Exit(1)
	}
}
