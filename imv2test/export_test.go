package imv2test

// ParseChecks exposes the script parser to the external tests.
var ParseChecks = parseChecks
