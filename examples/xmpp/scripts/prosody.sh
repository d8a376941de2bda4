#!/usr/bin/env bash
# Runs a throwaway Prosody (the Debian package: apt-get install -y prosody)
# for trying the XMPP Connector locally: in a temp directory, bound to
# 127.0.0.1 only, no server-to-server, a self-signed certificate for
# "localhost", an upload service and a MUC service, and two accounts:
# bot@localhost / bot-password and alice@localhost / alice-password.
# Runs in the foreground; Ctrl-C stops it and removes the directory.
#
#   scripts/prosody.sh [c2s-port] [http-port]     # default 5222 5280
set -euo pipefail
c2s=${1:-5222}
http=${2:-5280}
dir=$(mktemp -d /tmp/imv2-prosody-XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/data"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
	-keyout "$dir/key.pem" -out "$dir/cert.pem" -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,DNS:upload.localhost,DNS:conference.localhost" 2>/dev/null
cat >"$dir/prosody.cfg.lua" <<CFG
pidfile = "$dir/prosody.pid"
data_path = "$dir/data"
certificates = "$dir"
log = { info = "*console" }
interfaces = { "127.0.0.1" }
local_interfaces = { "127.0.0.1" }
c2s_ports = { $c2s }
c2s_direct_tls_ports = {}
legacy_ssl_ports = {}
s2s_ports = {}
component_ports = {}
http_ports = { $http }
http_interfaces = { "127.0.0.1" }
https_ports = {}
https_interfaces = {}
http_external_url = "http://127.0.0.1:$http/"
http_default_host = "upload.localhost"
modules_enabled = { "roster", "saslauth", "tls", "disco", "ping", "mam", "carbons", "offline", "http" }
modules_disabled = { "s2s" }
authentication = "internal_hashed"
storage = "internal"
ssl = { certificate = "$dir/cert.pem", key = "$dir/key.pem" }
VirtualHost "localhost"
Component "conference.localhost" "muc"
	modules_enabled = { "muc_mam" }
	muc_room_locking = false
Component "upload.localhost" "http_file_share"
CFG
as=()
if [ "$(id -u)" = 0 ]; then # Prosody runs as its own user, never as root
	chown -R prosody:prosody "$dir"
	as=(setpriv --reuid=prosody --regid=prosody --clear-groups)
fi
"${as[@]}" prosodyctl --config "$dir/prosody.cfg.lua" register bot localhost bot-password
"${as[@]}" prosodyctl --config "$dir/prosody.cfg.lua" register alice localhost alice-password
echo "prosody: c2s 127.0.0.1:$c2s, uploads http://127.0.0.1:$http/; CA certificate $dir/cert.pem" >&2
"${as[@]}" prosody -F --config "$dir/prosody.cfg.lua"
