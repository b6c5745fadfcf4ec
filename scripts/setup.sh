#!/usr/bin/env bash
# Installs the Debian packages the project builds with (Catch2 v2, RapidCheck with its Catch
# integration, Eigen 3, nlohmann-json, CLI11 (the tools' command lines), OpenMP (libgomp, with
# g++), CMake, a C++ compiler). CUDA (nvcc + CUB) comes from the CUDA toolkit when present; without
# it only the CPU targets build. clang, its compiler-rt (libFuzzer + sanitizer runtimes) and libomp
# build the fuzz harnesses (preset `fuzz`). pybind11 and the Python headers build the optional
# Python module tbe_verify (python/); numpy and pytest run its tests, installed for the interpreter
# CMake builds it for: the `python3` on PATH (python/CMakeLists.txt), from Debian's packages when
# that is Debian's python3, else with pip into that interpreter.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
pkgs=(cmake g++ make catch2 librapidcheck-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
      clang libclang-rt-14-dev libomp-dev
      pybind11-dev python3-dev python3-numpy python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# numpy + pytest for the python3 on PATH when it is not Debian's (e.g. a pyenv interpreter).
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import numpy, pytest" >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore numpy pytest
fi
