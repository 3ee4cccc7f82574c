package exporter

// TestConfig is testConfig for the tests of package exporter_test.
var TestConfig = testConfig
