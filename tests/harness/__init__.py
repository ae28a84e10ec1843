"""Test infrastructure for objmount: s3rver and the fault proxy."""
