# Checks that a README split into docs/ lost no paragraph: every paragraph
# (blank-line separated, a fenced block as one, heading markers ignored) of
# the old README must appear in README.md + docs/**/*.md.
# Usage (from the repository root): python3 test/tools/docs-paracheck.py OLD_README
import re, sys, glob
def norm_lines(text):
    out, fence = [], False
    for l in text.split('\n'):
        if l.startswith('```'): fence = not fence
        if not fence: l = re.sub(r'^#{1,6} ', '', l)
        out.append(l)
    return out
def paras(text):
    ps, cur, fence = [], [], False
    for raw, l in zip(text.split('\n'), norm_lines(text)):
        if l.startswith('```'): fence = not fence
        if not fence and re.match(r'^#{1,6} ', raw) and cur:
            ps.append(cur); cur = []
        if l.strip() == '' and not fence:
            if cur: ps.append(cur); cur = []
        else: cur.append(l)
    if cur: ps.append(cur)
    return [' '.join(' '.join(p).split()) for p in ps]
old = open(sys.argv[1]).read()
new = ''
for f in ['README.md'] + sorted(glob.glob('docs/**/*.md', recursive=True)):
    new += '\n' + '\n'.join(norm_lines(open(f).read()))
newn = ' '.join(new.split())
ps = paras(old)
lost = [p for p in ps if p not in newn]
print(f'paragraphs in old README: {len(ps)}; found in README.md+docs: {len(ps)-len(lost)}; lost: {len(lost)}')
for p in lost: print('LOST:', p[:150])
