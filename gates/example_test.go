package gates_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/gatebridge/gatebridge/gates"
)

func ExampleFunc() {
	weather := gates.Func(gates.Spec{
		Name:    "weather",
		Summary: "Print the weather in a city.",
		Usage:   "weather CITY",
		Params:  []gates.Param{{Name: "CITY", Description: "City name.", Required: true}},
	}, func(ctx context.Context, c *gates.Call) (int, error) {
		if len(c.Args) != 1 {
			return 0, gates.Usagef("weather: want one CITY")
		}
		fmt.Fprintf(c.Stdout, "sunny in %s\n", c.Args[0])
		return 0, nil
	})

	reg := gates.NewRegistry()
	reg.MustRegister(weather)

	g, _ := reg.Lookup("weather")
	var out bytes.Buffer
	code, err := g.Call(context.Background(), &gates.Call{Args: []string{"Lisbon"}, Stdout: &out})
	fmt.Print(out.String())
	fmt.Println("exit", gates.ExitCodeOf(code, err))

	code, err = g.Call(context.Background(), &gates.Call{Stdout: &out})
	fmt.Println("exit", gates.ExitCodeOf(code, err), err)
	// Output:
	// sunny in Lisbon
	// exit 0
	// exit 2 weather: want one CITY
}
