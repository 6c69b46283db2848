// Package config is the configuration of a site node (`fedsched node`).
//
// # Basics
//
// [Config] is a YAML document; every field's doc comment gives its default
// and what its zero value means. A node's configuration is resolved by
// [Resolve] from four sources, each overriding the one before:
//
//		defaults  <  YAML file  <  environment  <  command-line flags
//
//	  - Defaults: [Default].
//	  - File: the path given by --config, else by FEDSCHED_CONFIG; none if
//	    neither is set. Fields absent from the file keep their defaults;
//	    unknown fields are an error (a typo must not pass silently).
//	  - Environment: FEDSCHED_<FIELD>, the field's YAML path in upper case
//	    with dots as underscores: FEDSCHED_DATA_DIR,
//	    FEDSCHED_OVERBOOKING_POF_MAX. A variable that is set, even to the
//	    empty string, overrides. Lists are comma-separated.
//	  - Flags: --<field> with dashes, registered by [BindFlags] so that
//	    `fedsched node --help` documents every option: --data-dir,
//	    --overbooking-pof-max. Only flags given on the command line override.
//
// [Config.Validate] checks the result; Resolve calls it.
//
// # Caveats
//
// The names of the policies and risk tests are checked against fixed lists
// here; they must stay in step with the plan and overbook packages.
package config
