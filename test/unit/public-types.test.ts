import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const DIST = resolve(__dirname, '../../dist');
const ENTRIES = ['index.d.ts', 'node.d.ts', 'express.d.ts', 'deno.d.ts', 'client.d.ts'];

/**
 * The names every public entry point's exports mention, transitively, that are declared in our
 * own .d.ts files: each must be exported somewhere, or a library user cannot name the type of an
 * option they pass.
 */
function unnamedTypes(): string[] {
  const files = readdirSync(DIST)
    .filter((f) => f.endsWith('.d.ts'))
    .map((f) => join(DIST, f));
  const program = ts.createProgram(files, { strict: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const ours = (d: ts.Declaration) => d.getSourceFile().fileName.startsWith(DIST);
  const exported = new Set<string>();
  const queue: ts.Symbol[] = [];
  for (const entry of ENTRIES) {
    const source = program.getSourceFile(join(DIST, entry));
    const module = source && checker.getSymbolAtLocation(source);
    for (const symbol of module ? checker.getExportsOfModule(module) : []) {
      exported.add(symbol.name);
      queue.push(symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);
    }
  }
  const seen = new Set<ts.Symbol>();
  const missing = new Set<string>();
  while (queue.length > 0) {
    const symbol = queue.pop() as ts.Symbol;
    if (seen.has(symbol)) continue;
    seen.add(symbol);
    for (const declaration of symbol.declarations ?? []) {
      if (!ours(declaration)) continue;
      const visit = (node: ts.Node): void => {
        if (ts.isTypeReferenceNode(node) || ts.isExpressionWithTypeArguments(node)) {
          const at = ts.isTypeReferenceNode(node) ? node.typeName : node.expression;
          let target = checker.getSymbolAtLocation(at);
          if (target && target.flags & ts.SymbolFlags.Alias) target = checker.getAliasedSymbol(target);
          const declared = target?.declarations?.filter(ours) ?? [];
          if (target && declared.length > 0 && declared.some((d) => ts.isInterfaceDeclaration(d) || ts.isTypeAliasDeclaration(d) || ts.isClassDeclaration(d))) {
            if (!exported.has(target.name)) missing.add(target.name);
            queue.push(target);
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(declaration);
    }
  }
  return [...missing].sort();
}

describe('the published types', () => {
  it('export every type their exports mention, so each option a library user passes can be named', () => {
    expect(unnamedTypes()).toEqual([]);
  });
});
