# Sourced by sdk/python/build.sh and sdk/js/build.sh (bash): what the two
# share to make their builds byte-reproducible (see the SDKs' READMEs,
# "Reproducible builds").

# repro_shim <dir>: compiles sdk/repro-shim.c into <dir> and prints the
# library's path; says why and fails when it cannot (WEFT_REPRODUCIBLE=0,
# not Linux, no C compiler, the compiler failed).
repro_shim() {
  [ "${WEFT_REPRODUCIBLE:-1}" != 0 ] || return 1
  local src os cc=${CC:-} c
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/repro-shim.c
  os=$(uname -s)
  if [ "$os" != Linux ]; then
    echo "note: reproducible builds need Linux (LD_PRELOAD); this $os build is not byte-reproducible" >&2
    return 1
  fi
  if [ -z "$cc" ]; then
    for c in cc gcc clang; do
      if command -v "$c" >/dev/null; then cc=$c; break; fi
    done
  fi
  if [ -z "$cc" ]; then
    echo "warning: no C compiler (cc, gcc, clang or \$CC) for repro-shim.c: this build is not byte-reproducible" >&2
    return 1
  fi
  if ! "$cc" -O2 -shared -fPIC -o "$1/repro-shim.so" "$src" -ldl 2>"$1/repro-shim.log"; then
    echo "warning: $cc could not compile repro-shim.c: this build is not byte-reproducible" >&2
    sed 's/^/  /' "$1/repro-shim.log" >&2
    return 1
  fi
  echo "$1/repro-shim.so"
}

# repro_seed <dir>: a seed for the shim's random stream, from the contents
# (not the names' location or the mtimes) of the files under <dir>.
repro_seed() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}
