package bridge_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// An agent runtime registers its own gate as a Go function and runs a
// sandboxed command that calls it.
func ExampleRun() {
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "weather", Summary: "Today's weather for a city"},
		func(ctx context.Context, c *gates.Call) (int, error) {
			fmt.Fprintln(c.Stdout, "sunny in", strings.Join(c.Args, " "))
			return 0, nil
		}))
	res, err := bridge.Run(context.Background(), bridge.Config{Gates: reg}, local.New(),
		sandbox.Spec{Command: []string{"sh", "-c", `weather Paris | tr a-z A-Z`}})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println(res.Calls[0].Gate, res.Calls[0].Args, res.Calls[0].ExitCode)
	// Output:
	// SUNNY IN PARIS
	// weather [Paris] 0
}
