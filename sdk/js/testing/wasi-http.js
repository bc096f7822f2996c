// Natively there is no wasi:http: the SDK's `http` client answers from the
// function given to `http.setResponder` instead. bundle.mjs generates the
// component's version of this module (the world's wasi:http imports).
export const available = false;
export const handle = undefined;
export const Fields = undefined;
export const OutgoingRequest = undefined;
export const OutgoingBody = undefined;
