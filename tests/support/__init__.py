"""Test helpers: loopback servers and a fault-injecting proxy for the API client tests."""
