"""Test infrastructure for objmount: the test servers, the mounts and the fault proxy."""
