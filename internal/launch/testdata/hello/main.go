// Command hello is a rank program for the launcher's tests of Build: it
// prints its rank and the job size.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("hello from rank %s of %s\n", os.Getenv("GEX_RANK"), os.Getenv("GEX_SIZE"))
}
