# Convenience wrappers; the README's two commands are the scripts themselves
# (a fresh Debian 12 machine may not have make yet).
BUILD ?= build

.PHONY: all demo test deps clean

all:
	@scripts/deps.sh build
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)

demo:
	@scripts/demo.sh

test:
	@scripts/test.sh

deps:
	@scripts/deps.sh test

clean:
	rm -rf build build-asan build-tsan .venv *.configure.log
