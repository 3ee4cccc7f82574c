package fswalktest

import (
	"go/build"
	"go/importer"
	"go/token"
	"go/types"
	"maps"
	"slices"
	"strings"
	"testing"
)

// RequireSameAPI fails t unless the package at importPath, its declarations type-checked from
// source for each of goos (function bodies are not: `make vet` vets the package itself for
// windows), declares the same exported identifiers with the same types (parameter names aside):
// the product's one platform split (files for linux, stubs for !linux) then cannot break a
// portable package that compiles on Linux, which `make vet` does not type-check for another
// system (every dependency compiled once more: minutes cold).
func RequireSameAPI(t testing.TB, importPath string, goos ...string) {
	t.Helper()
	var first map[string]string
	for _, os := range goos {
		api, err := exportedAPI(os, importPath)
		if err != nil {
			t.Fatalf("type-checking %s for %s: %v", importPath, os, err)
		}
		if first == nil {
			first = api
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(first)) {
			if api[name] != first[name] {
				t.Errorf("%s for %s: %s is %q, for %s %q", importPath, os, name, api[name], goos[0], first[name])
			}
		}
		for name := range api {
			if _, ok := first[name]; !ok {
				t.Errorf("%s for %s: %s is declared only there: %q", importPath, os, name, api[name])
			}
		}
	}
}

// exportedAPI describes each exported identifier of the package at importPath as built for goos.
func exportedAPI(goos, importPath string) (map[string]string, error) {
	ctx := build.Default
	ctx.GOOS, ctx.CgoEnabled = goos, false
	// The source importer reads build.Default: the context is swapped in for the one import.
	saved := build.Default
	build.Default = ctx
	defer func() { build.Default = saved }()
	pkg, err := importer.ForCompiler(token.NewFileSet(), "source", nil).(types.ImporterFrom).ImportFrom(importPath, ".", 0)
	if err != nil {
		return nil, err
	}
	q := types.RelativeTo(pkg)
	api := map[string]string{}
	for _, name := range pkg.Scope().Names() {
		o := pkg.Scope().Lookup(name)
		if !o.Exported() {
			continue
		}
		switch o := o.(type) {
		case *types.Func:
			api[name] = "func" + signature(o.Type().(*types.Signature), q)
		case *types.TypeName:
			var methods []string
			if n, ok := o.Type().(*types.Named); ok {
				for m := range n.Methods() {
					if m.Exported() {
						methods = append(methods, m.Name()+signature(m.Type().(*types.Signature), q))
					}
				}
			}
			slices.Sort(methods)
			api[name] = "type " + types.TypeString(o.Type().Underlying(), q) + " " + strings.Join(methods, "; ")
		case *types.Const:
			api[name] = "const " + types.TypeString(o.Type(), q) + " = " + o.Val().ExactString()
		default:
			api[name] = types.ObjectString(o, q)
		}
	}
	return api, nil
}

// signature is sig's parameter and result types, without their names.
func signature(sig *types.Signature, q types.Qualifier) string {
	list := func(t *types.Tuple) string {
		var s []string
		for v := range t.Variables() {
			s = append(s, types.TypeString(v.Type(), q))
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	variadic := ""
	if sig.Variadic() {
		variadic = "..."
	}
	return list(sig.Params()) + variadic + " " + list(sig.Results())
}
