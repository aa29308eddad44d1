#!/usr/bin/env bash
# Makes a cluster's CA and certificates with openssl (README, "Security").
#
#   scripts/make_certs.sh DIR [--passphrase TEXT] [--role ROLE] NAME:HOST[,HOST...] ...
#
# DIR/ca.pem and DIR/ca.key are the CA (made on first use, kept after:
# run it again to add certificates). Each NAME:HOSTS makes DIR/NAME.pem
# (signed by the CA) and DIR/NAME.key, for the hosts listed: IP addresses
# become IP names, the rest DNS names; the first is the common name. A
# task's certificate lists the host its cluster spec gives it; a client's
# and a monitor's are for those names ("client", "monitor").
# Each certificate carries its role (URI urn:actorflow:role:ROLE): task
# (serves the cluster), client (runs graphs) or monitor (only watches: the
# console). The NAME "client" or "monitor" gives that role, any other
# "task"; --role sets it for the certificates after it. --passphrase
# encrypts the keys made after it.
#
#   scripts/make_certs.sh certs ps0:ps0.example.com worker0:worker0.example.com \
#     client:client monitor:monitor
#   scripts/make_certs.sh certs local:localhost,127.0.0.1
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
command -v openssl > /dev/null || {
  echo "make_certs: openssl is missing (apt-get install openssl)" >&2
  exit 1
}
dir=$1
shift
mkdir -p "$dir"
umask 077
days=825
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" \
    -subj "/CN=actorflow cluster CA $(basename "$(cd "$dir" && pwd)")" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null
  chmod 644 "$dir/ca.pem"
fi
passphrase=
role=
while [ $# -gt 0 ]; do
  case $1 in
    --passphrase)
      passphrase=$2
      shift 2
      continue
      ;;
    --role)
      case ${2:-} in
        task | client | monitor) ;;
        *)
          echo "make_certs: --role: expected task, client or monitor, got '${2:-}'" >&2
          exit 2
          ;;
      esac
      role=$2
      shift 2
      continue
      ;;
    *:*) ;;
    *)
      echo "make_certs: expected NAME:HOST[,HOST...], got '$1'" >&2
      exit 2
      ;;
  esac
  name=${1%%:*}
  hosts=${1#*:}
  shift
  san=
  for h in ${hosts//,/ }; do
    if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then
      san+=${san:+,}IP:$h
    else
      san+=${san:+,}DNS:$h
    fi
  done
  this_role=$role
  if [ -z "$this_role" ]; then
    case $name in
      client | monitor) this_role=$name ;;
      *) this_role=task ;;
    esac
  fi
  san+=,URI:urn:actorflow:role:$this_role
  key_opts=(-nodes)
  [ -z "$passphrase" ] || key_opts=(-passout "pass:$passphrase")
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    "${key_opts[@]}" -keyout "$dir/$name.key" -out "$dir/$name.csr" \
    -subj "/CN=${hosts%%,*}" 2> /dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" \
    -CAkey "$dir/ca.key" -CAcreateserial -out "$dir/$name.pem" \
    -days "$days" \
    -extfile <(printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' "$san") \
    2> /dev/null
  rm -f "$dir/$name.csr"
  chmod 644 "$dir/$name.pem"
  echo "$dir/$name.pem ($san)"
done
