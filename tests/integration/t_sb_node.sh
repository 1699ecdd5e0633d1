#!/usr/bin/env bash
# timeout: 120
# after-split-brain discard-node (discard-node alpha): a split brain while both nodes are
# secondary is resolved without an operator. discard-node alpha, although alpha wrote more: alpha's changes are dropped;
# the pair resyncs by itself, both backing files equal beta's copy from before the reconnect,
# and each node's split-brain hook ran with its volume, node, peer, policy and verdict.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/splitbrain.sh
. "$(dirname "$0")/splitbrain.sh"

sb_setup discard-node alpha
sb_split beta 3 1
sb_expect_winner beta
log "PASS: after-split-brain discard-node kept beta's data on both nodes"
