// Stands in for @rjsf/validator-ajv8, which @rjsf/core imports only for its test helper
// (getTestRegistry): ajv compiles schemas with `new Function`, which the inbox's CSP forbids.
// The inbox validates with validator.js instead.
const refuse = () => {
  throw new Error('@rjsf/validator-ajv8 is not bundled in the inbox: use validator.js');
};
export default { validateFormData: refuse, isValid: refuse, rawValidation: refuse };
export const customizeValidator = refuse;
