package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// A tutorial's commands are marked for test/tutorial, which runs every one
// of them on the demo, in order, and fails on any exit code but 0:
//
//   - A fenced ```sh block holds commands, one per line. A line ending in
//     `\` goes on onto the next; a line opening a heredoc (`<<'EOF'`) goes
//     on up to its terminator. Blank lines and `# comments` are skipped.
//   - An HTML comment on the line before the fence changes how the block
//     runs:
//     `<!-- tutorial: skip: REASON -->` does not run it (only where it cannot
//     run in a test, such as `krew install`; the reason is required);
//     `<!-- tutorial: background until "REGEX" -->` starts its one command
//     in the background, as in a terminal of its own, waits for a line of
//     its output to match REGEX, and stops it with SIGINT (Ctrl-C) after
//     the tutorial.
//   - `<!-- tutorial: requires FILE.md -->` anywhere in a tutorial runs
//     FILE.md's commands first, on the same demo.
//   - A ```text block right after a ```sh block (nothing but blank lines
//     between) is what its last command prints: each of its lines must be
//     a line of the output, spaces collapsed, so shown output cannot rot
//     either; "…" in a line stands for anything (a digest, an age).
//
// Any other block that holds commands (```bash, ```shell, ```console, a
// fence without a language, or a `$ ` prompt line in a ```text block) is
// an error: a command a tutorial shows is either run or marked skipped.

// Mode is how a block of commands runs.
type Mode string

const (
	// Run runs each command in the tutorial's shell and wants exit 0.
	Run Mode = "run"
	// Skip does not run the block; Reason says why.
	Skip Mode = "skip"
	// Background starts the block's one command on its own and waits
	// for Ready in its output.
	Background Mode = "background"
)

// Command is one command of a tutorial, as a user would paste it.
type Command struct {
	Line int // of its first line in the file
	Text string
}

// Block is one ```sh block and how it runs.
type Block struct {
	Line     int // of the fence
	Mode     Mode
	Reason   string         // Skip
	Ready    *regexp.Regexp // Background
	Commands []Command
	// Output is the ```text block that follows, if any: lines the last
	// command's output must hold.
	Output []string
}

// Tutorial is a tutorial's blocks in file order and the tutorials it
// requires.
type Tutorial struct {
	File     string
	Requires []string
	Blocks   []Block
}

var (
	markerRE   = regexp.MustCompile(`^<!--\s*tutorial:\s*(.*?)\s*-->$`)
	skipRE     = regexp.MustCompile(`^skip:\s*(\S.*)$`)
	bgRE       = regexp.MustCompile(`^background until "(.+)"$`)
	requiresRE = regexp.MustCompile(`^requires\s+(\S+\.md)$`)
	heredocRE  = regexp.MustCompile(`<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)(['"]?)`)
)

// shellLangs are fence languages that would hold commands; a tutorial must
// use ```sh for them.
var shellLangs = map[string]bool{"": true, "bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true}

// ParseTutorial reads the marked commands of a tutorial. It returns every
// problem at once: an unmarked block of commands, a marker that names
// nothing, a skip without a reason, a background block of more than one
// command, an unterminated heredoc or fence.
func ParseTutorial(file, text string) (Tutorial, []string) {
	t := Tutorial{File: file}
	var problems []string
	bad := func(line int, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, a...)))
	}
	lines := strings.Split(text, "\n")
	var pending *Block // set by a marker, for the next fence
	pendingLine := 0
	// Line indexes of the closing fences of the last block and of the
	// last ```sh block, to find a ```text block that follows one.
	lastFenceEnd, lastShEnd := -1, -2
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if m := markerRE.FindStringSubmatch(trimmed); m != nil {
			arg := m[1]
			switch {
			case requiresRE.MatchString(arg):
				t.Requires = append(t.Requires, requiresRE.FindStringSubmatch(arg)[1])
				continue
			case skipRE.MatchString(arg):
				pending = &Block{Mode: Skip, Reason: skipRE.FindStringSubmatch(arg)[1]}
			case bgRE.MatchString(arg):
				re, err := regexp.Compile(bgRE.FindStringSubmatch(arg)[1])
				if err != nil {
					bad(i+1, "background until: %v", err)
					continue
				}
				pending = &Block{Mode: Background, Ready: re}
			default:
				bad(i+1, "unknown tutorial marker %q: want `skip: REASON`, `background until \"REGEX\"` or `requires FILE.md`", arg)
				continue
			}
			pendingLine = i + 1
			continue
		}
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" && pending != nil {
				bad(pendingLine, "a tutorial marker must stand right before a ```sh block")
				pending = nil
			}
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
		fence := i + 1
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			bad(fence, "unterminated ``` fence")
			break
		}
		b := pending
		pending = nil
		if lang == "text" && len(t.Blocks) > 0 && lastFenceEnd == lastShEnd && onlyBlank(lines[lastShEnd+1:fence-1]) {
			prev := &t.Blocks[len(t.Blocks)-1]
			for _, l := range body {
				if strings.TrimSpace(l) != "" {
					prev.Output = append(prev.Output, l)
				}
			}
		}
		lastFenceEnd = i
		switch {
		case lang == "sh":
			if b == nil {
				b = &Block{Mode: Run}
			}
			b.Line = fence
			cmds, err := splitCommands(body, fence+1)
			if err != nil {
				bad(fence, "%v", err)
			}
			b.Commands = cmds
			if b.Mode == Background && len(cmds) != 1 {
				bad(fence, "a background block holds one command, not %d", len(cmds))
			}
			t.Blocks = append(t.Blocks, *b)
			lastShEnd = i
		case b != nil:
			bad(fence, "a tutorial marker stands before a ```%s block: only ```sh blocks hold commands", lang)
		case shellLangs[lang]:
			bad(fence, "```%s block: put a tutorial's commands in a ```sh block, which test/tutorial runs, or mark it <!-- tutorial: skip: REASON -->", lang)
		default:
			for j, l := range body {
				if strings.HasPrefix(strings.TrimSpace(l), "$ ") {
					bad(fence+1+j, "a `$ ` command in a ```%s block: put it in a ```sh block (and its output in a ```text block after it)", lang)
				}
			}
		}
	}
	if pending != nil {
		bad(pendingLine, "a tutorial marker must stand right before a ```sh block")
	}
	return t, problems
}

func onlyBlank(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

// MissingOutput is the lines of want (a ```text block) that are not lines
// of got, comparing with runs of spaces collapsed and ends trimmed.
func MissingOutput(want []string, got string) []string {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	have := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		have[norm(l)] = true
	}
	var missing []string
	for _, l := range want {
		if !have[norm(l)] && !matchesElided(norm(l), have) {
			missing = append(missing, l)
		}
	}
	return missing
}

// matchesElided: a shown line with "…" (a digest, an age) matches any line
// that has the rest around it.
func matchesElided(want string, have map[string]bool) bool {
	if !strings.Contains(want, "…") {
		return false
	}
	parts := strings.Split(want, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	for l := range have {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// splitCommands joins a ```sh block's lines into commands: `\` at the end
// of a line continues it, a heredoc runs to its terminator line.
func splitCommands(body []string, first int) ([]Command, error) {
	var out []Command
	for i := 0; i < len(body); i++ {
		l := body[i]
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		start := i
		text := []string{l}
		for strings.HasSuffix(strings.TrimRight(body[i], " \t"), `\`) && i+1 < len(body) {
			i++
			text = append(text, body[i])
		}
		if m := heredocRE.FindStringSubmatch(strings.Join(text, "\n")); m != nil {
			if m[1] != m[3] {
				return nil, fmt.Errorf("line %d: unbalanced quotes around heredoc word %s", first+start, m[2])
			}
			found := false
			for i+1 < len(body) {
				i++
				text = append(text, body[i])
				if strings.TrimSpace(body[i]) == m[2] {
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("line %d: heredoc %s has no terminator line", first+start, m[2])
			}
		}
		out = append(out, Command{Line: first + start, Text: strings.Join(text, "\n")})
	}
	return out, nil
}

// Commands are the tutorial's commands that run in its shell, in order
// (background and skipped blocks left out).
func (t Tutorial) Commands() []Command {
	var out []Command
	for _, b := range t.Blocks {
		if b.Mode == Run {
			out = append(out, b.Commands...)
		}
	}
	return out
}
