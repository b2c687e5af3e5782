"""The benchmark's source tree, made the same way every time: a seeded,
source-like tree of text files (sizes from a log-normal around 3 KiB, a
few of a few MiB, a needle for grep in about one file in 97). bench/run
times workloads on it; tests/test_36_fs_budgets.py counts their requests.
Not a test file: pytest collects nothing here.
Standard library only."""

import math
import os
import random

NEEDLE = "osbfs_bench_needle"
MTIME = 1700000000           # every file and directory of the tree
NFILES, NDIRS = 5000, 277    # the benchmark's tree
BIG_SIZES = (1 << 20, 3 << 19, 2 << 20, 3 << 20)

WORDS = ("src lib core net util io fs mem sched log test tests docs include "
         "api cli server client proto codec hash json http tls cache queue "
         "pool buf str list map tree heap time path env cfg opt auth user "
         "store index parse lex emit gen ir opt vm gc rt sys os arch x86 arm "
         "drivers block char input video sound usb pci acpi power crypto "
         "compress zlib lz4 image font text ui widget render shader math "
         "vec mat geom phys anim audio midi event signal thread sync lock").split()
EXTS = ((".c", 30), (".h", 20), (".py", 12), (".js", 8), (".go", 6), (".md", 5),
        (".txt", 4), (".json", 4), (".sh", 3), (".rs", 5), (".toml", 1), ("", 2))
KEYWORDS = ("static int", "return", "if (", "for (", "while (", "struct", "const char *",
            "void", "#include", "#define", "def", "import", "class", "self.", "func",
            "let", "var", "case", "break;", "else {", "}", "/*", " * ", "//", "#")


def line_pool(rng, n=6000):
    pool = []
    for _ in range(n):
        k = rng.choice(KEYWORDS)
        ids = "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        tail = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
        indent = "\t" * rng.randint(0, 3)
        pool.append("%s%s %s(%s); %s %d\n" % (indent, k, ids, tail, rng.choice(WORDS), rng.randint(0, 99999)))
    return pool


def file_text(rng, pool, size, needle):
    lines = rng.choices(pool, k=size // 40 + 2)
    if needle:
        lines.insert(rng.randrange(len(lines)), "/* %s: found by grep */\n" % NEEDLE)
    text = "".join(lines)
    while len(text) < size:
        text += "".join(rng.choices(pool, k=size // 40 + 2))
    return text[:max(size - 1, 0)] + "\n"


def make_tree(root, nfiles, ndirs, big_sizes, seed):
    """A source-like tree of nfiles text files in ndirs directories (root
    included), the same for the same arguments. Returns (total bytes,
    sizes)."""
    rng = random.Random(seed)
    pool = line_pool(rng)
    dirs = [("", 0)]
    names = {"": set()}
    while len(dirs) < ndirs:
        parent, depth = rng.choice([d for d in dirs if d[1] < 6] if rng.random() < 0.7 else dirs[:40])
        if depth >= 6:
            continue
        name = rng.choice(WORDS)
        while name in names[parent]:
            name = rng.choice(WORDS) + str(rng.randint(2, 99))
        names[parent].add(name)
        path = os.path.join(parent, name)
        names[path] = set()
        dirs.append((path, depth + 1))
    # every directory gets a file (git tracks no empty directory), the rest
    # go mostly to a few busy ones
    weights = [rng.paretovariate(1.2) for _ in dirs]
    homes = [d for d, _ in dirs] + rng.choices([d for d, _ in dirs], weights=weights, k=nfiles - len(dirs))
    sizes = []
    big = dict(zip(rng.sample(range(nfiles), len(big_sizes)), big_sizes))
    for d, _ in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for i, d in enumerate(homes):
        ext = rng.choices([e for e, _ in EXTS], weights=[w for _, w in EXTS])[0]
        name = rng.choice(WORDS) + ("_" + rng.choice(WORDS) if rng.random() < 0.6 else "") + ext
        if not ext and rng.random() < 0.5:
            name = rng.choice(("Makefile", "README", "LICENSE", "Kconfig", "CODEOWNERS"))
        while name in names[d]:
            name = "%s%d%s" % (os.path.splitext(name)[0], rng.randint(2, 999), ext)
        names[d].add(name)
        size = big.get(i) or int(min(max(rng.lognormvariate(math.log(3000), 1.1), 40), 256 << 10))
        sizes.append(size)
        path = os.path.join(root, d, name)
        with open(path, "w") as f:
            f.write(file_text(rng, pool, size, i % 97 == 0))
        os.chmod(path, 0o644)
        os.utime(path, (MTIME, MTIME))
    for d, _ in sorted(dirs, key=lambda x: -x[1]):
        p = os.path.join(root, d)
        os.chmod(p, 0o755)
        os.utime(p, (MTIME, MTIME))
    return sum(sizes), sizes
