// Command canary calls golang.org/x/text/language.ParseAcceptLanguage of a release with a
// known vulnerability (GO-2021-0113); it is never built or run, only scanned.
package main

import (
	"fmt"

	"golang.org/x/text/language"
)

func main() {
	fmt.Println(language.ParseAcceptLanguage("en"))
}
