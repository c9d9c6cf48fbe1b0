// Package docs checks the Markdown documentation: README.md and docs/**.md.
// Its tests fail on a relative link to a file that does not exist, or to an
// anchor that no heading of the target file makes, so moving a page or
// renaming a heading cannot leave a dead link behind.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// linkRE matches an inline link or image, [text](target "title").
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpanRE matches inline code, whose brackets are not links.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// inlineLinkRE keeps a link's text when a heading is turned into an anchor.
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Link is one relative link found in a Markdown file.
type Link struct {
	File   string // the file that holds it, relative to the root
	Line   int
	Target string
}

// scan returns the lines of a Markdown file that are not inside a fenced
// code block (others are ""), so code samples are neither links nor headings.
func scan(text string) []string {
	lines := strings.Split(text, "\n")
	out := make([]string, len(lines))
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out[i] = l
		}
	}
	return out
}

// Links returns the relative links of a Markdown text (not http, https or
// mailto), outside code blocks and code spans.
func Links(file, text string) []Link {
	var links []Link
	for i, l := range scan(text) {
		l = codeSpanRE.ReplaceAllString(l, "")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			t := m[1]
			if strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			links = append(links, Link{File: file, Line: i + 1, Target: t})
		}
	}
	return links
}

// Anchor is the id GitHub gives a heading: its text without Markdown, lower
// case, without punctuation but '-' and '_', spaces turned into '-'.
func Anchor(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Anchors returns every anchor a Markdown text's headings make, numbering
// repeated ones as GitHub does (x, x-1, x-2).
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range scan(text) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// Check returns one problem per broken relative link of the given Markdown
// files (paths relative to root): a missing file or directory, or an anchor
// no heading of the target makes.
func Check(root string, files []string) ([]string, error) {
	texts := map[string]string{}
	read := func(rel string) (string, error) {
		if t, ok := texts[rel]; ok {
			return t, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", err
		}
		texts[rel] = string(b)
		return string(b), nil
	}
	var problems []string
	for _, f := range files {
		text, err := read(f)
		if err != nil {
			return nil, err
		}
		for _, l := range Links(f, text) {
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := f
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), path)))
				if strings.HasPrefix(target, "../") {
					problems = append(problems, fmt.Sprintf("%s:%d: %s leaves the repository", l.File, l.Line, l.Target))
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", l.File, l.Line, l.Target))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: an anchor into a file that is not Markdown", l.File, l.Line, l.Target))
				continue
			}
			t, err := read(target)
			if err != nil {
				return nil, err
			}
			if !Anchors(t)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading in %s makes #%s", l.File, l.Line, l.Target, target, anchor))
			}
		}
	}
	return problems, nil
}

// MarkdownFiles returns README.md and every .md file under docs/, relative
// to root.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
