# deputy — two commands matter (see README):
#   make demo   build if needed, run the mover benchmark against the calling core
#   make test   every test: release, ASan+UBSan, TSan, install, Python
# Both install missing Debian packages when run as root (scripts/deps.sh).

BUILD ?= build
JOBS ?= $(shell nproc)
DEPUTY := $(BUILD)/tools/deputy

.PHONY: all build demo test deps clean

all: build

deps:
	@scripts/deps.sh build

$(BUILD)/build.ninja:
	@scripts/deps.sh build
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: $(BUILD)/build.ninja
	@scripts/deps.sh build
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(DEPUTY) bench mover -o memmove -s 4k,64k,1m --compare cpu
	$(DEPUTY) bench mover -o crc32c -s 64k,1m --compare cpu

test:
	@scripts/run-tests.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan .venv
