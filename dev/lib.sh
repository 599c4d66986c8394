# Shared by dev/provision and dev/env. Sourced, not run.
#
# The environment is a Debian sid chroot per architecture under $EMBER_DEV_ENV_DIR
# (default /var/lib/ember-env), shared by every clone on the machine. Each step
# is idempotent; a stamp holding the hash of the recipe says whether the
# installed packages match it.

set -euo pipefail

EMBER_DEV_ENV_DIR=${EMBER_DEV_ENV_DIR:-/var/lib/ember-env}
SID_MIRROR=${EMBER_DEV_SID_MIRROR:-http://deb.debian.org/debian}
DEV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$DEV_DIR/.." && pwd)
VENV=/opt/ember-venv

log() { printf '[ember-env] %s\n' "$*" >&2; }
die() { printf '[ember-env] error: %s\n' "$*" >&2; exit 1; }

# --arch accepts Debian and GNU spellings.
normalize_arch() {
    case "$1" in
        amd64|x86_64|x86-64) echo amd64 ;;
        arm64|aarch64) echo arm64 ;;
        *) die "unknown architecture '$1' (accepted: amd64/x86_64, arm64/aarch64)" ;;
    esac
}

host_arch() { normalize_arch "$(uname -m)"; }

chroot_dir() { echo "$EMBER_DEV_ENV_DIR/sid-$1"; }

recipe_hash() {
    local arch=$1
    cat "$DEV_DIR/lib.sh" "$DEV_DIR/provision" "$DEV_DIR/recipe/$arch.apt" \
        "$DEV_DIR/recipe/venv-$arch.txt" | sha256sum | cut -c1-16
}

recipe_packages() { grep -v '^\s*#' "$DEV_DIR/recipe/$1.apt" | grep -v '^\s*$' | tr '\n' ' '; }

ensure_host_tools() {
    local arch=$1 missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ "$arch" != "$(host_arch)" ]; then
        command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
        command -v update-binfmts >/dev/null || missing+=(binfmt-support)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing host tools: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if [ "$arch" != "$(host_arch)" ]; then ensure_binfmt; fi
}

# arm64 binaries (and their subprocesses) run through qemu-user via binfmt_misc.
ensure_binfmt() {
    if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        update-binfmts --enable qemu-aarch64 || die "could not register qemu-aarch64 with binfmt_misc"
    fi
}

is_mounted() { mountpoint -q "$1"; }

# A bind mount shows its source's device and inode.
same_dir() { [ "$(stat -c %d:%i "$1" 2>/dev/null)" = "$(stat -c %d:%i "$2")" ]; }

# `dst` shows the directory `src`. A bind mount outlives its source: a clone
# deleted and made again at the same path (CI's fresh clone) leaves the old
# mount showing the deleted directory, so a mount point alone proves nothing.
ensure_bind() {
    local src=$1 dst=$2
    same_dir "$dst" "$src" && return 0
    if is_mounted "$dst"; then
        log "replacing the stale mount at $dst"
        umount -l "$dst" || die "could not unmount the stale $dst"
    fi
    mkdir -p "$dst"
    mount --bind "$src" "$dst" || die "could not bind-mount $src at $dst"
    same_dir "$dst" "$src" || die "$dst does not show $src after mounting it"
}

# Mounts vanish on reboot; put back whichever are missing.
ensure_mounts() {
    local root=$1
    is_mounted "$root/proc" || mount -t proc proc "$root/proc" || die "could not mount $root/proc"
    if ! is_mounted "$root/sys"; then
        mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys" || die "could not mount $root/sys"
    fi
    if ! is_mounted "$root/dev"; then
        mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" || die "could not mount $root/dev"
    fi
    ensure_bind /tmp "$root/tmp"
    ensure_bind "$REPO" "$root$REPO"
}

# The proxy's CA is trusted by the host as locally added certificates; pip and
# cargo inside the chroot need the same trust.
sync_trust() {
    local root=$1
    mkdir -p "$root/usr/local/share/ca-certificates"
    if ! diff -rq /usr/local/share/ca-certificates "$root/usr/local/share/ca-certificates" >/dev/null 2>&1; then
        cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
        [ -x "$root/usr/sbin/update-ca-certificates" ] && chroot "$root" update-ca-certificates >/dev/null 2>&1
    fi
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99ember-valid-until"
}

in_chroot() {
    local root=$1; shift
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
        PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# Runs "$@" holding the named lock. "$@" is deliberately not part of a `||`
# list: bash ignores `set -e` inside a function called that way, which once let
# a failed mount pass silently. Under `set -e` a failure exits the script and
# the lock goes with the process; in a caller's `|| die` the status comes back.
with_lock() {
    local name=$1 lockfd status; shift
    mkdir -p "$EMBER_DEV_ENV_DIR"
    exec {lockfd}>"$EMBER_DEV_ENV_DIR/$name.lock"
    flock "$lockfd"
    "$@"
    status=$?
    exec {lockfd}>&-
    return "$status"
}
