#!/usr/bin/env bash
# Makes sure a Vulkan driver is present: installs lavapipe (Mesa's software
# Vulkan) and the Vulkan loader with apt-get when no driver is registered.
set -euo pipefail

say() { echo "setup-vulkan: $*" >&2; }
has_icd() {
    for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
        ls "$dir"/*.json >/dev/null 2>&1 && return 0
    done
    [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ]
}
has_loader() { ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; }

if has_icd && has_loader; then
    say "a Vulkan driver and loader are present"
    exit 0
fi
command -v apt-get >/dev/null || { say "no Vulkan driver, and no apt-get to install lavapipe: install a Vulkan driver"; exit 1; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
say "installing lavapipe (mesa-vulkan-drivers) and libvulkan1"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends mesa-vulkan-drivers libvulkan1 >/dev/null
# dpkg may leave the linker cache to a deferred trigger; the loader check reads it.
$SUDO ldconfig 2>/dev/null || true
has_icd && has_loader || { say "install finished but no Vulkan driver is registered"; exit 1; }
say "lavapipe installed"
