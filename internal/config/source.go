package config

import (
	"bytes"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// SourceOf says where a key's value came from: the first of flag (in
// flags), env, file (configFile, resolved; configGiven as named) and
// default (Defaults and reg's) that sets it (Load's precedence).
func SourceOf(configFile, configGiven string, flags *pflag.FlagSet, reg Registered) func(string) string {
	var file *viper.Viper
	if configFile != "" {
		file = viper.New()
		file.SetConfigType("yaml")
		if data, _, err := ReadTrusted(configFile); err != nil || file.ReadConfig(bytes.NewReader(data)) != nil {
			file = nil
		}
	}
	return func(key string) string {
		for flag, k := range FlagKeys {
			if k == key && flags.Changed(flag) {
				return "flag --" + flag
			}
		}
		env := "GATEBRIDGE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		_, bound := Defaults[key]
		if _, ok := reg.Defaults[key]; ok {
			bound = true
		}
		if bound && os.Getenv(env) != "" {
			return "env " + env
		}
		if file != nil && file.InConfig(key) {
			return "file " + configGiven
		}
		return "default"
	}
}
