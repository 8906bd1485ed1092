/**
 * A small validator for the subset of OpenAPI v3 schemas that Kubernetes publishes (the API's
 * OpenAPI and CRDs' openAPIV3Schema): type, properties, required, items, additionalProperties,
 * $ref, oneOf, enum, x-kubernetes-int-or-string and x-kubernetes-preserve-unknown-fields. As
 * `kubectl apply --validate=strict` does, a field the schema does not name is an error.
 * Returns the errors, each with its path ([] = valid).
 */
// biome-ignore lint/suspicious/noExplicitAny: schemas and documents are plain JSON
type Json = any;

export function validateSchema(value: Json, schema: Json, root: Json, path = "$"): string[] {
  if (schema === undefined || schema === null) return [];
  if (typeof schema.$ref === "string") {
    const target = schema.$ref
      .replace(/^#\//, "")
      .split("/")
      .reduce((node: Json, key: string) => node?.[key], root);
    if (target === undefined) return [`${path}: unresolved ${schema.$ref}`];
    return validateSchema(value, target, root, path);
  }
  if (Array.isArray(schema.oneOf)) {
    const passing = schema.oneOf.filter(
      (s: Json) => validateSchema(value, s, root, path).length === 0,
    );
    return passing.length === 1 ? [] : [`${path}: matches ${passing.length} of oneOf`];
  }
  if (schema["x-kubernetes-int-or-string"] === true)
    return typeof value === "string" || Number.isInteger(value)
      ? []
      : [`${path}: not int or string`];
  if (Array.isArray(schema.enum) && !schema.enum.includes(value))
    return [`${path}: ${JSON.stringify(value)} not one of ${schema.enum.join(", ")}`];
  const errors: string[] = [];
  switch (schema.type) {
    case "string":
      if (typeof value !== "string") errors.push(`${path}: expected a string`);
      break;
    case "integer":
      if (!Number.isInteger(value)) errors.push(`${path}: expected an integer`);
      break;
    case "number":
      if (typeof value !== "number") errors.push(`${path}: expected a number`);
      break;
    case "boolean":
      if (typeof value !== "boolean") errors.push(`${path}: expected a boolean`);
      break;
    case "array":
      if (!Array.isArray(value)) errors.push(`${path}: expected an array`);
      else
        for (const [i, item] of value.entries())
          errors.push(...validateSchema(item, schema.items, root, `${path}[${i}]`));
      break;
    case "object": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        errors.push(`${path}: expected an object`);
        break;
      }
      for (const name of schema.required ?? [])
        if (!(name in value)) errors.push(`${path}: missing required ${name}`);
      const properties = schema.properties ?? {};
      for (const [key, item] of Object.entries(value)) {
        if (key in properties) {
          errors.push(...validateSchema(item, properties[key], root, `${path}.${key}`));
        } else if (typeof schema.additionalProperties === "object") {
          errors.push(...validateSchema(item, schema.additionalProperties, root, `${path}.${key}`));
        } else if (
          schema.properties !== undefined &&
          schema.additionalProperties !== true &&
          schema["x-kubernetes-preserve-unknown-fields"] !== true
        ) {
          errors.push(`${path}: unknown field ${key}`);
        }
      }
      break;
    }
  }
  return errors;
}
