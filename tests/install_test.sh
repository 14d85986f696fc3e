#!/usr/bin/env bash
# Installs Sluice into a fresh temporary prefix, then, against that prefix
# only: configures and builds examples/ (find_package(Sluice CONFIG)) and runs
# its program (a job and a flow on SQLite), and compiles and links a program
# that includes every installed header with `pkg-config --cflags --libs
# sluice`. Registered in CTest as install_test (tests/CMakeLists.txt).
#
#   install_test.sh SOURCE_DIR WORK_DIR CXX_COMPILER [COMPILER_LAUNCHER]
#
# WORK_DIR/build is a plain (no sanitizer) Debug build of the libraries and
# the sluice program, without debug information (-O0 only: compiling and
# above all linking the example against static libraries with it took most
# of the test's time, and nothing here reads it), kept between runs so that a
# rerun only rebuilds what changed (and a first run reuses ccache). SLUICE_INSTALL_TEST_FRESH=1 starts
# it over. The prefix (WORK_DIR/prefix) and the examples build are new every
# run.
# SLUICE_INSTALL_TEST_CMAKE_ARGS adds configure options to that build (for
# example -DBUILD_SHARED_LIBS=ON, with another WORK_DIR).
set -euo pipefail
source_dir=$1
work=$2
cxx=$3
launcher=${4:-}
jobs=${SLUICE_INSTALL_TEST_JOBS:-2}

# The prefix is emptied at the start and removed after a pass (a failure
# leaves it to look at). Its path stays the same between runs, so the
# compiler commands below do too, and ccache can answer them.
prefix="$work/prefix"
rm -rf "$prefix"
mkdir -p "$prefix"
read -r -a extra_args <<<"${SLUICE_INSTALL_TEST_CMAKE_ARGS:-}"
launcher_args=()
if [ -n "$launcher" ]; then
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
fi
step() { echo "install_test: $* ($SECONDS s)"; }

step "building Sluice in $work/build"
if [ "${SLUICE_INSTALL_TEST_FRESH:-0}" = 1 ]; then rm -rf "$work/build"; fi
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DSLUICE_SANITIZE=OFF -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" "${launcher_args[@]}" "${extra_args[@]}" >/dev/null
cmake --build "$work/build" -j "$jobs" --target sluice

step "installing into $prefix"
cmake --install "$work/build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/sluice" || { echo "install_test: no bin/sluice" >&2; exit 1; }
# With shared libraries, the installed program finds them by its RPATH.
if ldd "$prefix/bin/sluice" | grep 'not found'; then
  echo "install_test: bin/sluice does not find its libraries" >&2
  exit 1
fi
for config in SluiceConfig.cmake SluiceConfigVersion.cmake SluiceTargets.cmake; do
  if [ -z "$(find "$prefix" -name "$config")" ]; then
    echo "install_test: no $config installed" >&2
    exit 1
  fi
done
# Only public headers: nothing from engine/src or the backends' directories.
for private in engine_impl.h sqlite_backend.h postgres_backend.h memory_backend.h; do
  if [ -n "$(find "$prefix/include" -name "$private")" ]; then
    echo "install_test: private header $private was installed" >&2
    exit 1
  fi
done

step "building examples/ against the install"
rm -rf "$work/examples"
cmake -S "$source_dir/examples" -B "$work/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  "${launcher_args[@]}" >/dev/null
found=$(sed -n 's/^Sluice_DIR:PATH=//p' "$work/examples/CMakeCache.txt")
case "$found" in
  "$prefix"/*) ;;
  *) echo "install_test: examples/ found Sluice in '$found', not in $prefix" >&2
     exit 1 ;;
esac
cmake --build "$work/examples" -j "$jobs"
step "running the example"
"$work/examples/job_and_flow"

step "pkg-config"
pc=$(find "$prefix" -name sluice.pc)
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
version=$(pkg-config --modversion sluice)
# Every installed header in one program, so a public header that includes
# one that was not installed fails here.
program="$work/pkg_config_check.cc"
{
  (cd "$prefix/include" && find sluice -name '*.h' | sort) |
    sed 's/.*/#include "&"/'
  cat <<'PROGRAM'
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
  auto backend = sluice::OpenBackend("memory:");
  if (!backend.ok()) return 1;
  std::printf("pkg-config build: Sluice %s\n", SLUICE_VERSION);
  return argc == 2 && std::strcmp(argv[1], SLUICE_VERSION) == 0 ? 0 : 1;
}
PROGRAM
} >"$program"
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
$launcher "$cxx" -std=c++20 "$program" -o "$work/pkg_config_check" \
  $(pkg-config --cflags --libs sluice)
# A shared install is not on the loader's path: point it there.
LD_LIBRARY_PATH="$(dirname "$(dirname "$pc")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$work/pkg_config_check" "$version"
rm -rf "$prefix"
step "passed"
