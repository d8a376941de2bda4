package testcard

import "testing"

func TestIM_IsValid(t *testing.T) {
	c := IM("sdktest", "SDK test")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Supports.Profiles = nil // a Card without the profile its tools need
	c.Supports.Targets = nil
	c.Supports.TargetTypes = []string{"email"}
	if c.Validate() == nil {
		t.Fatal("a broken Card validated: the check cannot fail")
	}
}
