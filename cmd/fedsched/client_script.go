package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// directivePrefix starts a line of options in a job script, as #SBATCH does
// for Slurm.
const directivePrefix = "#FEDSCHED"

// parseDirectives returns the arguments of the #FEDSCHED lines at the top of
// a script: after an optional interpreter line, among the leading comment
// and blank lines; the first other line ends them, as sbatch reads #SBATCH
// lines. Words are split as a shell would, with '...' and "..." quoting and
// backslash escapes; a word starting with '#' ends the line (a comment).
func parseDirectives(script []byte) ([]string, error) {
	var args []string
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 0, 4096), len(script)+1)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if lineNo == 1 && strings.HasPrefix(line, "#!") {
			continue
		}
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		rest, ok := strings.CutPrefix(line, directivePrefix)
		if !ok {
			continue
		}
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // #FEDSCHEDULE: not ours
		}
		words, err := splitWords(rest)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		args = append(args, words...)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return args, nil
}

// splitWords splits a directive line into words.
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, nil
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// applyDirectives reads a job script and sets, from its #FEDSCHED lines,
// every job option the command line did not give (the command line wins,
// as with sbatch).
func applyDirectives(cmd *cobra.Command, path string) ([]byte, error) {
	script, err := os.ReadFile(path)
	if err != nil {
		return nil, invalidArg("script: %v", err)
	}
	if bytes.IndexByte(script, 0) >= 0 {
		return nil, invalidArg("script %s: contains a NUL byte; a job script is a text file", path)
	}
	args, err := parseDirectives(script)
	if err != nil {
		return nil, invalidArg("script %s: %s: %v", path, directivePrefix, err)
	}
	given := map[string]bool{}
	cmd.Flags().Visit(func(f *pflag.Flag) { given[f.Name] = true })
	// A scratch set of the job options only: it checks the directives
	// (no --addr or --json in a script) and reports each in order.
	var scratch submitFlags
	fs := pflag.NewFlagSet(directivePrefix, pflag.ContinueOnError)
	fs.SetOutput(bytes.NewBuffer(nil))
	registerJobFlags(fs, &scratch)
	err = fs.ParseAll(args, func(f *pflag.Flag, value string) error {
		if err := f.Value.Set(value); err != nil {
			return err
		}
		if given[f.Name] {
			return nil
		}
		return cmd.Flags().Set(f.Name, value)
	})
	if err != nil {
		return nil, invalidArg("script %s: %s line: %v", path, directivePrefix, err)
	}
	if fs.NArg() > 0 {
		return nil, invalidArg("script %s: %s line: unexpected argument %q (only options)", path, directivePrefix, fs.Arg(0))
	}
	return script, nil
}
