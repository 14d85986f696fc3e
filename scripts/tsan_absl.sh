#!/usr/bin/env bash
# Builds Debian's Abseil with ThreadSanitizer into a private prefix and prints
# the prefix. Debian's libabsl-dev is not instrumented, so TSan cannot see
# absl::Mutex in it; this builds the same source with the same Debian patches
# (absl::debian3 inline namespace, own string_view/optional) with
# -fsanitize=thread, so headers and static libraries match each other and the
# ABI of the rest of the build (docs/decisions/0007-dependencies.md). Only the
# libraries Sluice links are built (scripts/tsan_absl/CMakeLists.txt).
#
# The prefix lives outside the clone and is reused while its stamp file
# matches the installed libabsl-dev version, the flags and the library list:
#   ${SLUICE_TSAN_ABSL_CACHE:-~/.cache/sluice-tsan-absl}/<version>-clang14
# Needs a deb-src entry and dpkg-dev (scripts/bootstrap.sh installs both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cxx=${SLUICE_TSAN_CXX:-clang++-14}
version=$(dpkg-query -W -f='${Version}' libabsl-dev)
flags="-fsanitize=thread -O1 -g -fno-omit-frame-pointer"
cache=${SLUICE_TSAN_ABSL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-tsan-absl}
prefix="$cache/$version-$(basename "$cxx")"
stamp="$prefix/.sluice-stamp"
recipe=$(sha256sum <"$here/tsan_absl/CMakeLists.txt" | cut -c1-16)
want="abseil $version; $cxx; $flags; $recipe"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$prefix"
  exit 0
fi

# A fixed work path (not mktemp) so that ccache hits when the prefix is
# rebuilt from the same source.
work="$cache/work-$version"
rm -rf "$work" "$prefix"
mkdir -p "$work"
(
  cd "$work"
  if ! apt-get source --download-only "abseil=$version" >download.log 2>&1; then
    echo "tsan_absl: apt-get source abseil=$version failed (is there a deb-src" \
      "entry? run scripts/bootstrap.sh):" >&2
    tail -5 download.log >&2
    exit 1
  fi
  # apt-get checked the files against the signed Release file; dpkg-source
  # only warns that it has no key for the .dsc's own signature.
  dpkg-source -x ./abseil_*.dsc src >unpack.log 2>&1 ||
    { tail -5 unpack.log >&2; exit 1; }
)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# Debian builds the static libraries with C++17 (debian/rules); the options
# that fix the ABI come from the patched absl/base/options.h.
cmake -S "$here/tsan_absl" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DABSL_SOURCE_DIR="$work/src" \
  -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF \
  -DABSL_PROPAGATE_CXX_STD=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib >"$work/configure.log" 2>&1 ||
  { tail -20 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --target sluice_absl >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" --component sluice >/dev/null
echo "$want" >"$stamp"
rm -rf "$work"
echo "$prefix"
