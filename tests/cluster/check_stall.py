#!/usr/bin/env python3
"""Runs test_cluster stall: rank 1 stops itself (SIGSTOP), which the
launcher does not see; rank 0 must find it silent over the network and end
the job naming it within SHOAL_NET_DEAD_MS plus 2.5 s (start-up, two hosts'
agents and the stop; a sanitizer build linked with libpmix and libfabric
took 2.51 s in all), after running the failure handler it registered
(shoal_on_peer_failure).
Usage: check_stall.py SHOALRUN TEST_CLUSTER DEAD_MS [LAUNCH_OPTION...]
(launch options such as --hosts go to shoalrun)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from jobcheck import run_failing_job  # noqa: E402

shoalrun, prog, dead_ms, launch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
env = dict(os.environ, SHOAL_NET_DEAD_MS=str(dead_ms))
fail = run_failing_job([shoalrun, "--timeout", "30", *launch, "-n", "2", prog, "stall"], dead_ms / 1000 + 2.5,
                       "peer rank 1 stopped answering", env=env,
                       extra_checks=[lambda out: None if "failure handler of rank 0 (registered): rank 1: peer rank 1 "
                                     "stopped answering" in out else "the failure handler did not run"])
sys.exit(1 if fail else 0)
