#!/usr/bin/env bash
# The main job: ingest the bundled English + Chinese sample corpus and run a few cited searches.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ragspine-lite demo "$@"
