// placeholder until the runtime lands
namespace actorflow {}
