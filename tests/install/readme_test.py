#!/usr/bin/env python3
"""Follows README.md's "A first program" literally (issue 20 item 1).

Takes the C program, the shell commands and the CMake lines from the README
itself, runs the shell commands with HOME in a scratch directory (so
`~/.local` is a fresh prefix) next to a `build` link to this build, checks
that the installed shoalrun runs the program on 8 ranks with the answers the
program computes, then builds the same program with the README's CMake lines
against the same prefix and runs that too.  No LD_LIBRARY_PATH anywhere.

usage: readme_test.py README BUILD_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

RANKS = 8


def fail(msg):
    print(f"readme_test: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def blocks(section, lang):
    return re.findall(r"```" + lang + r"\n(.*?)```", section, re.S)


def run(cmd, cwd, env, what, shell=False):
    print(f"readme_test: {what}: {cmd if shell else ' '.join(cmd)}", flush=True)
    p = subprocess.run(cmd, cwd=cwd, env=env, shell=shell, executable="/bin/sh" if shell else None,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    print(p.stdout, end="")
    if p.returncode != 0:
        fail(f"{what} exited with {p.returncode}")
    return p.stdout


def check_answers(out, what):
    got = sorted(re.findall(r"^rank (\d+): rank 0 answered (\d+)$", out, re.M), key=lambda t: int(t[0]))
    want = [(str(r), str(2 * r)) for r in range(RANKS)]
    if got != want:
        fail(f"{what}: expected one answer 2R for each of ranks 0..{RANKS - 1}, got {got}")


def main():
    readme, build, work = sys.argv[1:4]
    text = open(readme).read()
    m = re.search(r"^## A first program\n(.*?)^## ", text, re.S | re.M)
    if not m:
        fail("README.md has no '## A first program' section")
    section = m.group(1)
    c, sh, cm = blocks(section, "c"), blocks(section, "sh"), blocks(section, "cmake")
    if not (c and sh and cm):
        fail("the section lacks its C program, shell commands or CMake lines")
    shell = sh[0]
    if f"-n {RANKS}" not in shell:
        fail(f"the README's run command no longer uses -n {RANKS}; update this test")

    shutil.rmtree(work, ignore_errors=True)
    home = os.path.join(work, "home")
    os.makedirs(home)
    os.symlink(os.path.abspath(build), os.path.join(work, "build"))
    with open(os.path.join(work, "ping.c"), "w") as f:
        f.write(c[0])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SHOAL_", "PMIX_", "OMPI_", "SLURM_", "PKG_CONFIG")) and k != "LD_LIBRARY_PATH"}
    env["HOME"] = home
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # shoalrun must come from the README's PATH line

    out = run("set -e\n" + shell, work, env, "the README's commands", shell=True)
    check_answers(out, "pkg-config build")

    proj = os.path.join(work, "cmake-ping")
    os.makedirs(proj)
    shutil.copy(os.path.join(work, "ping.c"), proj)
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.20)\nproject(ping C)\n" + cm[0])
    prefix = os.path.join(home, ".local")
    run(["cmake", "-S", proj, "-B", os.path.join(proj, "b"), f"-DCMAKE_PREFIX_PATH={prefix}"], work, env,
        "configure with the README's CMake lines")
    run(["cmake", "--build", os.path.join(proj, "b")], work, env, "build")
    out = run([os.path.join(prefix, "bin", "shoalrun"), "-n", str(RANKS), os.path.join(proj, "b", "ping")],
              work, env, "run the CMake build")
    check_answers(out, "CMake build")
    print("readme_test: the README's first program builds and runs as written (pkg-config and CMake)")


if __name__ == "__main__":
    main()
